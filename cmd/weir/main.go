// Command weir is the command line of the weir stream processor: it runs
// built-in jobs, lists jobs and configuration keys, and runs benchmarks.
// See docs/cli.md, or run `weir --help`.
package main

import (
	"os"

	// Checkpoint storage on S3 (execution.checkpointing.dir=s3://bucket/prefix,
	// credentials and region from the usual AWS environment).
	_ "gocloud.dev/blob/s3blob"

	"github.com/weirstream/weir/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
