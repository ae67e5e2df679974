// Command gentree writes a reproducible project-like tree for measuring workspace sync:
// mostly small text files (source-like, compressible) and some random binary files, in
// nested directories of 20 files each.
//
//	go run ./providers/workspace/internal/gentree -dir /tmp/tree -files 20000 -size 200MB
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gentree", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to create (must not exist)")
	files := fs.Int("files", 20000, "number of files")
	sizeFlag := fs.String("size", "200MB", "total bytes, with an optional KB, MB or GB suffix (powers of 1000)")
	binShare := fs.Float64("binary", 0.4, "share of the bytes in random binary files (1 file in 10)")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return fmt.Errorf("-size %q: %w", *sizeFlag, err)
	}
	if *files < 10 || size < int64(*files) {
		return fmt.Errorf("-files %d and -size %d: want at least 10 files and 1 byte per file", *files, size)
	}
	if *binShare < 0 || *binShare >= 1 {
		return fmt.Errorf("-binary %v: want a share in [0, 1)", *binShare)
	}
	if _, err := os.Stat(*dir); err == nil {
		return fmt.Errorf("-dir %s already exists", *dir)
	}

	r := rand.New(rand.NewPCG(*seed, *seed+1))
	nBin := *files / 10
	nText := *files - nBin
	avgBin := int64(float64(size) * *binShare / float64(nBin))
	avgText := int64(float64(size) * (1 - *binShare) / float64(nText))
	var total int64
	buf := make([]byte, 0, 4*avgBin+1024)
	for i := range *files {
		rel := filepath.Join(fmt.Sprintf("m%03d", i/1000), fmt.Sprintf("p%02d", (i/100)%10), fmt.Sprintf("c%d", (i/20)%5))
		// Sizes vary uniformly between 0.1x and 1.9x the average.
		vary := func(avg int64) int64 { return max(1, int64(float64(avg)*(0.1+1.8*r.Float64()))) }
		buf = buf[:0]
		var name string
		if i%10 == 9 {
			name = fmt.Sprintf("blob%05d.bin", i)
			n := vary(avgBin)
			for int64(len(buf)) < n {
				buf = binary.LittleEndian.AppendUint64(buf, r.Uint64())
			}
			buf = buf[:n]
		} else {
			name = fmt.Sprintf("file%05d%s", i, exts[i%len(exts)])
			buf = appendText(buf, r, vary(avgText))
		}
		if err := write(filepath.Join(*dir, rel, name), buf); err != nil {
			return err
		}
		total += int64(len(buf))
	}
	fmt.Printf("gentree: %d files, %d bytes in %s\n", *files, total, *dir)
	return nil
}

var exts = []string{".go", ".py", ".tf", ".yaml", ".md", ".json", ".sh", ".txt", ".ts"}

var words = strings.Fields(`resource variable output module provider data locals terraform
	func return if else for range package import type struct interface error nil true false
	def class self async await yield lambda name value count index region bucket policy
	aws_s3_bucket aws_iam_role aws_security_group ingress egress cidr_blocks from_port to_port
	kubernetes deployment service replicas image container port env secret config map`)

// appendText appends about n bytes of indented, source-like lines.
func appendText(buf []byte, r *rand.Rand, n int64) []byte {
	start := len(buf)
	for int64(len(buf)-start) < n {
		buf = append(buf, strings.Repeat("  ", r.IntN(4))...)
		for w := 2 + r.IntN(8); w > 0; w-- {
			buf = append(buf, words[r.IntN(len(words))]...)
			if r.IntN(6) == 0 {
				buf = strconv.AppendInt(append(buf, '_'), int64(r.IntN(1000)), 10)
			}
			buf = append(buf, ' ')
		}
		buf = append(buf, '\n')
	}
	return buf[:start+int(n)]
}

func write(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	_, err = w.Write(data)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("want a positive number of bytes, e.g. 200MB")
	}
	return n * mult, nil
}
