package bench

import "github.com/stackwright/stackwright/internal/procfs"

// rss is the manager's VmRSS now (0 if it cannot be read).
func (b *bench) rss() int64 {
	ps, err := procfs.Read(b.mgr.pid())
	if err != nil {
		return 0
	}
	return ps.RSS
}

// sayRSS reports the manager's RSS as progress.
func (b *bench) sayRSS() { b.say("manager RSS %s", MiB(b.rss())) }
