package testkit

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// LoopbackDial is a DialContext whose every connection comes from another loopback
// address (127.1.0.1, 127.1.0.2, ...; all of 127.0.0.0/8 is loopback on Linux), so a
// client sending many refused credentials on purpose is as many clients to the
// server's per-address throttle, and the server still listens on 127.0.0.1 only.
func LoopbackDial() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var n atomic.Uint32
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		i := n.Add(1) % (1 << 24)
		ip := net.IPv4(127, byte(1+i>>16)%255, byte(i>>8), byte(i))
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
		return d.DialContext(ctx, network, addr)
	}
}
