package budget

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/stackwright/stackwright/internal/artifact"
)

// Flag is the manager flag that sets the budget; errors name it.
const Flag = "max-tenant-bytes-in-memory"

// ErrSpent is the class of the error a charge over the budget returns.
var ErrSpent = errors.New("the manager's memory budget for tenant input is spent")

// Budget is a number of bytes shared by every charge. The zero value and nil have no
// limit. It is safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64
	// refused counts charges refused, for metrics and tests.
	refused atomic.Int64
}

// New returns a budget of limit bytes; limit <= 0 is no limit.
func New(limit int64) *Budget { return &Budget{limit: limit} }

// InUse is the bytes charged and not yet released.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Refused counts the charges refused so far.
func (b *Budget) Refused() int64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}

// take charges n bytes, or nothing and an error when that would pass the limit.
func (b *Budget) take(n int64) error {
	if b == nil || b.limit <= 0 || n <= 0 {
		if b != nil && n > 0 {
			b.used.Add(n)
		}
		return nil
	}
	for {
		used := b.used.Load()
		if used+n > b.limit {
			b.refused.Add(1)
			return fmt.Errorf("%w: %s of %s in use by other reconciles and requests (--%s); try again shortly",
				ErrSpent, artifact.FormatBytes(used), artifact.FormatBytes(b.limit), Flag)
		}
		if b.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// Charge is one holder's share of a budget: what it took, given back at once by Release.
type Charge struct {
	b    *Budget
	mu   sync.Mutex
	held int64
	done bool
}

// Charge starts a share of b holding nothing.
func (b *Budget) Charge() *Charge { return &Charge{b: b} }

// Take adds n bytes to the share; it fails, taking nothing, when the budget cannot hold
// them (or after Release).
func (c *Charge) Take(n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return fmt.Errorf("%w: charge already released", ErrSpent)
	}
	if err := c.b.take(n); err != nil {
		return err
	}
	c.held += n
	return nil
}

// Held is what the share holds.
func (c *Charge) Held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// Release gives the share back. It is idempotent.
func (c *Charge) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	if c.b != nil {
		c.b.used.Add(-c.held)
	}
	c.held = 0
}

// Reader charges every byte read from r to c: a read the budget cannot hold fails with
// its error, having returned nothing of it.
func (c *Charge) Reader(r io.Reader) io.Reader { return &reader{r: r, c: c} }

type reader struct {
	r   io.Reader
	c   *Charge
	err error
}

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.r.Read(p)
	if n > 0 {
		if cerr := r.c.Take(int64(n)); cerr != nil {
			r.err = cerr
			return 0, cerr
		}
	}
	return n, err
}
