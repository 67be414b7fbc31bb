package workspace

import (
	"fmt"
	"sync"
	"testing"
)

// TestLockForgets: a conversation's lock excludes its other holders, and
// once nobody holds or waits for it, it is gone from the map (which would
// otherwise grow with every conversation ever used).
func TestLockForgets(t *testing.T) {
	var w Workspace
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv := fmt.Sprint("c", i%7)
			unlock := w.lock(conv)
			mu.Lock()
			inside[conv]++
			if inside[conv] != 1 {
				t.Errorf("%s held by %d at once", conv, inside[conv])
			}
			mu.Unlock()
			mu.Lock()
			inside[conv]--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if n := len(w.locks); n != 0 {
		t.Errorf("%d locks left after every holder let go", n)
	}
}
