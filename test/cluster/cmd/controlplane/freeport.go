package main

import (
	"fmt"
	"net"
	"os"
)

// runFreePort prints a TCP port on 127.0.0.1 that was free a moment ago (for components that take
// no port 0); the caller retries a start that finds it taken.
func runFreePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "free-port:", err)
		return 1
	}
	defer l.Close()
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	return 0
}
