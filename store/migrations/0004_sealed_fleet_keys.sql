-- The fleet's keys are sealed from now on (AES-256-GCM under a key derived
-- from TOOLWIRE_PASSPHRASE with Argon2id, as the OAuth tokens are): a
-- reader of the table, or of a backup, learns nothing that seals a
-- requestState. The keys kept in clear until now are dropped; the first
-- replica that needs one makes it again, sealed (a requestState issued
-- before the upgrade is refused, and its call is made again).
DELETE FROM toolwire.fleet_keys;
