// Package sharedfile holds what toolwire's small state files (the pin
// store, the OAuth token store) need to be shared by several toolwire
// processes: an advisory lock around each read-modify-write ([Lock]) and a
// replacement that is never seen half written ([WriteAtomic]).
package sharedfile
