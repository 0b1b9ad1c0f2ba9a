// htpasswd prints the htpasswd line (bcrypt, the only hash distribution's registry accepts)
// of the user named by its argument, the password read from standard input: the node tests
// make their registry's credentials with it, without Apache's tools.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" || strings.ContainsAny(os.Args[1], ":\n") {
		fmt.Fprintln(os.Stderr, "usage: htpasswd USER < password")
		os.Exit(2)
	}
	password, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && password == "" {
		fmt.Fprintln(os.Stderr, "htpasswd: no password on standard input")
		os.Exit(2)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(strings.TrimSuffix(password, "\n")), bcrypt.DefaultCost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "htpasswd:", err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
