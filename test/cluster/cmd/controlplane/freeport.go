package main

import (
	"fmt"
	"net"
	"os"
)

// freeLoopbackAddr returns a TCP address on 127.0.0.1 that was free a moment ago, for listeners
// that take no port 0; the caller retries a start that finds it taken.
func freeLoopbackAddr() (*net.TCPAddr, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr), nil
}

// runFreePort prints the port of freeLoopbackAddr (for kube-apiserver's --secure-port).
func runFreePort() int {
	addr, err := freeLoopbackAddr()
	if err != nil {
		fmt.Fprintln(os.Stderr, "free-port:", err)
		return 1
	}
	fmt.Println(addr.Port)
	return 0
}
