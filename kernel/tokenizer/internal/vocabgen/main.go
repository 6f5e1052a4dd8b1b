// Command vocabgen writes the tokenizer's vocabularies as compressed data
// files (kernel/tokenizer/*.vocab.zst): every token of an encoding in rank
// order, each as its length (a uvarint) and its bytes, compressed with
// zstd. The tokens come from github.com/tiktoken-go/tokenizer, whose
// tables are OpenAI's; the kernel's tests check that the two count alike.
//
//	go run ./kernel/tokenizer/internal/vocabgen -o kernel/tokenizer
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
	"github.com/tiktoken-go/tokenizer/codec"
)

func main() {
	out := flag.String("o", ".", "directory to write NAME.vocab.zst in")
	flag.Parse()
	for name, c := range map[string]*codec.Codec{"o200k_base": codec.NewO200kBase(), "cl100k_base": codec.NewCl100kBase()} {
		if err := write(filepath.Join(*out, name+".vocab.zst"), c); err != nil {
			fmt.Fprintln(os.Stderr, "vocabgen:", err)
			os.Exit(1)
		}
	}
}

func write(path string, c *codec.Codec) error {
	var raw []byte
	n := 0
	for id := uint(0); ; id++ {
		tok, err := c.Decode([]uint{id})
		if err != nil {
			break // past the last rank (the ranks are dense)
		}
		raw = binary.AppendUvarint(raw, uint64(len(tok)))
		raw = append(raw, tok...)
		n++
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		return err
	}
	b := enc.EncodeAll(raw, nil)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d tokens, %d bytes, %d compressed\n", path, n, len(raw), len(b))
	return nil
}
