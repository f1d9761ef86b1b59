// Package doctable reads the Markdown tables of docs/ that tests compare with
// the code: a table is found by its exact header row, and each row comes
// back as a map from column to cell. It never writes a file.
package doctable

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Read returns the rows of the one table in the Markdown file at path whose
// header cells are exactly columns (backticks around a header cell are
// ignored). Cells keep their Markdown, backticks included. No such table, two
// of them, or a row with another number of cells is an error.
func Read(path string, columns ...string) ([]map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read table: %w", err)
	}
	lines := strings.Split(string(data), "\n")
	var rows []map[string]string
	found := 0
	for i := 0; i < len(lines); i++ {
		header := Cells(lines[i])
		for j := range header {
			header[j] = strings.Trim(header[j], "`")
		}
		if !slices.Equal(header, columns) {
			continue
		}
		found++
		// Skip the |---|---| separator, then read until the table ends.
		for i += 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			cells := Cells(lines[i])
			if len(cells) != len(columns) {
				return nil, fmt.Errorf("%s:%d: %d cells, want %d", path, i+1, len(cells), len(columns))
			}
			row := map[string]string{}
			for j, c := range columns {
				row[c] = cells[j]
			}
			rows = append(rows, row)
		}
	}
	if found != 1 {
		return nil, fmt.Errorf("%s: %d tables with columns %q, want 1", path, found, columns)
	}
	return rows, nil
}

// Cells splits one table row into its trimmed cells; nil for a line that is
// not a table row.
func Cells(line string) []string {
	line = strings.TrimSpace(line)
	if len(line) < 2 || !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	parts := strings.Split(line[1:len(line)-1], "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

var code = regexp.MustCompile("`([^`]*)`")

// Code returns the text of every `code span` in a cell, in order.
func Code(cell string) []string {
	var out []string
	for _, m := range code.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// Commands returns the commands of the fenced code block that follows the
// line `<!-- commands: NAME -->` in the Markdown file at path: a line ending
// in a backslash joined with the next, comments (from " # " or a leading #)
// and blank lines left out. Tests run these lines, so that a page's commands
// are the ones tested; no such block, or an empty one, is an error.
func Commands(path, name string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read commands: %w", err)
	}
	marker := "<!-- commands: " + name + " -->"
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) != marker {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "```") {
			return nil, fmt.Errorf("%s:%d: %s is not followed by a code block", path, i+1, marker)
		}
		indent := lines[i+1][:len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " "))]
		var out []string
		pending := ""
		for _, l := range lines[i+2:] {
			l = strings.TrimPrefix(l, indent)
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				if pending != "" {
					return nil, fmt.Errorf("%s: block %s ends inside a continued line", path, name)
				}
				if len(out) == 0 {
					return nil, fmt.Errorf("%s: block %s has no command", path, name)
				}
				return out, nil
			}
			if c := strings.Index(l, " # "); c >= 0 {
				l = l[:c]
			}
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "#") {
				l = ""
			}
			if strings.HasSuffix(l, "\\") {
				pending += strings.TrimSpace(strings.TrimSuffix(l, "\\")) + " "
				continue
			}
			if l = strings.TrimSpace(pending + l); l != "" {
				out = append(out, l)
			}
			pending = ""
		}
		return nil, fmt.Errorf("%s: block %s is not closed", path, name)
	}
	return nil, fmt.Errorf("%s: no %s", path, marker)
}
