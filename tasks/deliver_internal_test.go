package tasks

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	d := &Deliverer{o: DeliveryOptions{BaseDelay: 5 * time.Second, MaxDelay: time.Hour,
		Jitter: func(d time.Duration) time.Duration { return d - 1 }}}
	lo := &Deliverer{o: DeliveryOptions{BaseDelay: 5 * time.Second, MaxDelay: time.Hour,
		Jitter: func(time.Duration) time.Duration { return 0 }}}
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second,
		8: 640 * time.Second, 10: 2560 * time.Second, 11: time.Hour, 40: time.Hour} {
		if got := d.backoff(n); got != want-1 {
			t.Errorf("backoff(%d) with the most jitter = %v, want %v", n, got, want-1)
		}
		if got := lo.backoff(n); got != want-want/2 {
			t.Errorf("backoff(%d) with no jitter = %v, want %v", n, got, want-want/2)
		}
	}
}
