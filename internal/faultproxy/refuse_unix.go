//go:build unix

package faultproxy

import (
	"net"
	"syscall"
)

// refuser is a TCP socket bound to a port without listening: a dial to the port is refused
// (the kernel answers it with a reset), and the port stays taken.
type refuser struct{ fd int }

func bindOnly(addr *net.TCPAddr) (*refuser, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, err
	}
	// The listener just closed on this port; its accepted connections may linger in TIME_WAIT.
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &refuser{fd: fd}, nil
}

func (r *refuser) close() { syscall.Close(r.fd) }
