// offhours-launch is the fixed launcher of every offhours research step.
//
// Argo substitutes a JSON-list parameter as one string, so the step's container runs this
// launcher with the command, args and env as JSON; it decodes them and execs the program
// directly. No shell ever sees a parameter. An init container copies the launcher (a static
// binary, so it runs in any image) into a shared volume with --install.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
)

// exitUsage is EX_USAGE: the step's parameters were malformed; retrying cannot help.
const exitUsage = 64

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "a string"
}

func decodeStrings(flagName, text string) ([]string, error) {
	var raw []any
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON list: %v", flagName, err)
	}
	out := make([]string, len(raw))
	for i, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: item %d is %s, not a string", flagName, i, jsonType(v))
		}
		if strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("%s: item %d holds a NUL character, which no program argument can", flagName, i)
		}
		out[i] = s
	}
	return out, nil
}

// decodeEnv returns the variables of --env, sorted by name, as name and value pairs.
func decodeEnv(text string) ([][2]string, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("--env: not a JSON object: %v", err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		s, ok := raw[k].(string)
		if !ok {
			return nil, fmt.Errorf("--env: value of %q is %s, not a string", k, jsonType(raw[k]))
		}
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("--env: %q is not a valid variable name", k)
		}
		if strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("--env: value of %q holds a NUL character, which no environment can", k)
		}
		out = append(out, [2]string{k, s})
	}
	return out, nil
}

func install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := dest + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}

func run(args []string) (int, error) {
	fs := flag.NewFlagSet("offhours-launch", flag.ContinueOnError)
	installTo := fs.String("install", "", "copy this launcher to the given path and exit")
	command := fs.String("command", "", "JSON list: program and fixed arguments")
	extra := fs.String("args", "[]", "JSON list: further arguments")
	env := fs.String("env", "{}", "JSON object: environment variables to add")
	if err := fs.Parse(args); err != nil {
		return exitUsage, err
	}
	if *installTo != "" {
		if err := install(*installTo); err != nil {
			return 1, fmt.Errorf("--install: %v", err)
		}
		return 0, nil
	}
	argv, err := decodeStrings("--command", *command)
	if err != nil {
		return exitUsage, err
	}
	if len(argv) == 0 {
		return exitUsage, errors.New("--command: the list is empty; it must name the program to run")
	}
	more, err := decodeStrings("--args", *extra)
	if err != nil {
		return exitUsage, err
	}
	vars, err := decodeEnv(*env)
	if err != nil {
		return exitUsage, err
	}
	// A variable of --env replaces the image's of the same name rather than being appended after it:
	// with two entries, C (getenv) and Go would read the first, Python and shells the last. Set
	// before the lookup, so a PATH given in --env also finds the program, as env(1) does.
	for _, kv := range vars {
		if err := os.Setenv(kv[0], kv[1]); err != nil {
			return exitUsage, fmt.Errorf("--env: %s: %v", kv[0], err)
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 127, fmt.Errorf("--command: %v", err)
	}
	// Exec replaces this process, so SIGTERM goes straight to the research program.
	err = syscall.Exec(path, append(argv, more...), os.Environ())
	return 126, fmt.Errorf("exec %s: %v", path, err)
}

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "offhours-launch: %v\n", err)
	}
	os.Exit(code)
}
