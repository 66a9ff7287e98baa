// Command pause is the local cluster's pod sandbox ("pause") program: it blocks until
// SIGTERM or SIGINT and then exits 0. Built static (CGO_ENABLED=0) by hack/image.sh
// into the image localhost/pause:local, which containerd uses as its sandbox_image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	os.Exit(0)
}
