//go:build unix && !linux

package benchkit

import (
	"errors"
	"time"
)

// ErrNoProc is returned on systems without Linux's /proc.
var ErrNoProc = errors.New("process figures need Linux /proc")

// ProcessStat is what /proc/PID/stat says of a process that identifies it.
type ProcessStat struct {
	PID, PPID int
	Start     uint64
}

func ProcessCPU(pid int) (time.Duration, error)  { return 0, ErrNoProc }
func RSS(pid int) (int64, error)                 { return 0, ErrNoProc }
func AnonRSS(pid int) (int64, error)             { return 0, ErrNoProc }
func Stat(pid int) (ProcessStat, error)          { return ProcessStat{}, ErrNoProc }
func Descendants(pid int) ([]ProcessStat, error) { return nil, ErrNoProc }
func MachineBusy() (time.Duration, error)        { return 0, ErrNoProc }
func CPUModel() string                           { return "" }
