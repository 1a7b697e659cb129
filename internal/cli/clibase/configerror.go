package clibase

import (
	"errors"
	"fmt"
	"io"

	"github.com/fencepost-dev/fencepost/internal/config"
)

// PrintConfigError prints a configuration's problems, each with its
// hint on the next line.
func PrintConfigError(w io.Writer, err error) {
	var es config.Errors
	if !errors.As(err, &es) {
		fmt.Fprintln(w, err)
		return
	}
	for _, e := range es {
		hint := e.Hint
		e.Hint = ""
		fmt.Fprintln(w, e.Error())
		if hint != "" {
			fmt.Fprintf(w, "    hint: %s\n", hint)
		}
		e.Hint = hint
	}
}

// PrintConfigWarnings prints a configuration's warnings, each with its
// hint on the next line, as PrintConfigError prints problems.
func PrintConfigWarnings(w io.Writer, ws []config.Warning) {
	for _, wa := range ws {
		hint := wa.Hint
		wa.Hint = ""
		fmt.Fprintln(w, wa.String())
		if hint != "" {
			fmt.Fprintf(w, "    hint: %s\n", hint)
		}
	}
}
