// Package tokenizer counts tokens with the OpenAI encodings o200k_base and
// cl100k_base. The vocabularies are compiled into the binary
// (github.com/tiktoken-go/tokenizer): nothing is downloaded at run time.
// A vocabulary is loaded the first time its encoding is used.
package tokenizer

import (
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/agentkernel/agentkernel/kernel"
)

// The encodings this package holds.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
)

// Encoding is one tokenizer; it implements kernel.Tokenizer and is safe
// for concurrent use.
type Encoding struct {
	name  string
	once  sync.Once
	newFn func() *codec.Codec
	c     *codec.Codec
}

var (
	o200k  = &Encoding{name: O200kBase, newFn: codec.NewO200kBase}
	cl100k = &Encoding{name: Cl100kBase, newFn: codec.NewCl100kBase}
)

// Get returns the encoding called name, or an error naming the ones there
// are.
func Get(name string) (*Encoding, error) {
	switch name {
	case O200kBase:
		return o200k, nil
	case Cl100kBase:
		return cl100k, nil
	}
	return nil, fmt.Errorf("unknown tokenizer %q (want %s or %s)", name, O200kBase, Cl100kBase)
}

// Name is the encoding's name.
func (e *Encoding) Name() string { return e.name }

// Count returns the number of tokens in text. Special-token text such as
// "<|endoftext|>" counts as ordinary text, as it does in a chat message.
func (e *Encoding) Count(text string) int {
	e.once.Do(func() { e.c = e.newFn() })
	n, err := e.c.Count(text)
	if err != nil { // only in the strict UTF-8 mode, which is not set
		return (len(text) + 3) / 4
	}
	return n
}

var _ kernel.Tokenizer = (*Encoding)(nil)
