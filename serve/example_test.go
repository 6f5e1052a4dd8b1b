package serve_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/serve"
)

// ExampleKeyStore creates a key, shows that only its hash is stored, and
// authenticates with the secret.
func ExampleKeyStore() {
	dir, _ := os.MkdirTemp("", "keys")
	defer os.RemoveAll(dir)
	ks, err := serve.OpenKeys(filepath.Join(dir, "keys.json"), nil)
	if err != nil {
		panic(err)
	}
	k, secret, err := ks.Create("ci", "", []string{"read", "run"})
	if err != nil {
		panic(err)
	}
	file, _ := os.ReadFile(ks.Path())
	got, ok := ks.Authenticate(secret)
	_, wrong := ks.Authenticate(secret + "x")
	fmt.Println(k.Name, k.Scopes, k.Owner() == "key:"+k.ID)
	fmt.Println("secret in the file:", strings.Contains(string(file), secret[len(serve.KeyPrefix):]))
	fmt.Println("authenticated:", ok, got.Name, "wrong secret:", wrong)
	// Output:
	// ci [run read] true
	// secret in the file: false
	// authenticated: true ci wrong secret: false
}
