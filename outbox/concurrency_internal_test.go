package outbox

import "testing"

// TestABatchRunsWholeUpToTheDefaultConcurrency: with Concurrency 0 a batch runs all at once,
// but never more than DefaultConcurrency records (each holds connections, and Lambda gives a
// function 1,024 open files); a set Concurrency is kept.
func TestABatchRunsWholeUpToTheDefaultConcurrency(t *testing.T) {
	for _, c := range []struct{ set, n, want int }{
		{0, 0, 1}, {0, 10, 10}, {0, 256, 256}, {0, 257, 256}, {0, 10000, 256}, {4, 10, 4}, {4, 2, 2}, {500, 1000, 500},
	} {
		w := &Worker{cfg: Config{Concurrency: c.set}}
		if got := w.concurrency(c.n); got != c.want {
			t.Errorf("Concurrency %d, batch %d: %d at once, want %d", c.set, c.n, got, c.want)
		}
	}
}
