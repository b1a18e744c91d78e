// The pod fingerprint of NodeResourceTopology as upstream computes it
// (github.com/k8stopologyawareschedwg/podfingerprint, the version go.mod
// pins): the judge of topology::common::PodFingerprint. Reads pod sets from
// standard input, one pod a line ("<namespace> <name>"), sets separated by
// an empty line, and prints each set's signature on a line of its own.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/k8stopologyawareschedwg/podfingerprint"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	fp := podfingerprint.NewFingerprint(0)
	pods := 0
	flush := func() {
		fmt.Fprintln(out, fp.Sign())
		fp.Reset(0)
		pods = 0
	}
	for in.Scan() {
		line := in.Text()
		if line == "" {
			flush()
			continue
		}
		namespace, name, ok := strings.Cut(line, " ")
		if !ok {
			fmt.Fprintf(os.Stderr, "not \"<namespace> <name>\": %q\n", line)
			os.Exit(2)
		}
		fp.Add(namespace, name)
		pods++
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if pods > 0 {
		flush()
	}
}
