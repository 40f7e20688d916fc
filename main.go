// Command dataservice is a data-management service — schemas, instances, users,
// permissions, API keys and pipelines — in one binary with its data in one SQLite file.
// The command line lives in internal/cli; docs/architecture.md maps the packages.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"dataservice/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
