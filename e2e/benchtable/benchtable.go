// Package benchtable keeps docs/BENCHMARKS.md: one table of the
// project's current figures, each row saying what was measured, the
// figure, the command that measures it, the machine, the date and the
// commit. Only `upgradelab bench report` writes it, from measurement
// files, never a person:
//
//   - the output of `go test -bench` (make bench keeps it as bench.txt);
//   - an e2e artifacts folder: results.json and the environment.json the
//     suite writes beside it (the make target, machine, commit);
//   - timing files of scripts/timed: a whole command such as make e2e on
//     a fresh machine, its wall time and exit status.
//
// A row measured again replaces its old self; a row not measured again
// keeps its own date and commit, so the table stays whole when only part
// of it is measured anew. Older figures live in git's history.
package benchtable

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Row is one figure.
type Row struct {
	What, Figure, Command, Machine, Date, Commit string
}

// Env is where and when a figure was measured.
type Env struct {
	// Target is the make target that measured (e2e, e2e-faults, bench).
	Target string `json:"target,omitempty"`
	// Labels and Repeat are a suite's selection (GINKGO_LABELS, REPEAT):
	// a figure of part of a suite is another figure than the whole's.
	Labels  string `json:"labels,omitempty"`
	Repeat  int    `json:"repeat,omitempty"`
	Machine string `json:"machine"`
	Date    string `json:"date"`
	Commit  string `json:"commit"`
}

// EnvFile is a measurement folder's record of where it was measured.
const EnvFile = "environment.json"

// TablePath is the table's place in the repository.
const TablePath = "docs/BENCHMARKS.md"

// Here is this machine, today and repoRoot's commit (with "+changes"
// when the tree differs from it in anything but the table itself, which
// measuring rewrites).
func Here(repoRoot string) Env {
	e := Env{Machine: machine(), Date: time.Now().UTC().Format(time.DateOnly), Commit: "unknown"}
	cmd := exec.Command("git", "rev-parse", "--short=12", "HEAD")
	cmd.Dir = repoRoot
	if out, err := cmd.Output(); err == nil {
		e.Commit = strings.TrimSpace(string(out))
		status := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!"+TablePath)
		status.Dir = repoRoot
		if out, err := status.Output(); err == nil && len(out) > 0 {
			e.Commit += "+changes"
		}
	}
	return e
}

// machine names this machine as scripts/timed does: cores, memory and
// CPU model.
func machine() string {
	gib := 0
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int
		for _, line := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kib); err == nil {
				gib = (kib + 1<<19) >> 20
				break
			}
		}
	}
	model := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	return fmt.Sprintf("%d cores, %d GiB, %s", runtime.NumCPU(), gib, model)
}

// WriteEnv records e in dir (an e2e artifacts folder, a bench folder).
func WriteEnv(dir string, e Env) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, EnvFile), b, 0o644)
}

// ReadEnv reads dir's record of where it was measured.
func ReadEnv(dir string) (Env, error) {
	var e Env
	b, err := os.ReadFile(filepath.Join(dir, EnvFile))
	if err != nil {
		return e, fmt.Errorf("%s: %w (what measured the folder writes it: the e2e suite, make bench)", dir, err)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("%s: %w", filepath.Join(dir, EnvFile), err)
	}
	return e, nil
}

// Header and the marker line the table starts after; everything above
// the marker is kept as it is.
const marker = "<!-- written by `upgradelab bench report`; edit the text above this line only -->"

var columns = []string{"what", "figure", "command", "machine", "date", "commit"}

// Table is the rows of docs/BENCHMARKS.md, in order, and the text above
// them.
type Table struct {
	Preamble string
	Rows     []Row
}

// ReadTable reads path; a missing file is an empty table.
func ReadTable(path string) (Table, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Table{}, nil
	}
	if err != nil {
		return Table{}, err
	}
	return ParseTable(path, b)
}

// ParseTable reads a table file's content; name is used in errors.
func ParseTable(name string, data []byte) (Table, error) {
	var t Table
	var pre strings.Builder
	inTable := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case !inTable && line == marker:
			inTable = true
		case !inTable:
			pre.WriteString(line + "\n")
		case strings.HasPrefix(line, "|"):
			cells := splitRow(line)
			if len(cells) != len(columns) {
				return t, fmt.Errorf("%s:%d: a row of %d cells, want %d (%s)", name, n, len(cells), len(columns), strings.Join(columns, ", "))
			}
			if cells[0] == columns[0] || strings.Trim(cells[0], "-: ") == "" {
				continue // the header and its rule
			}
			t.Rows = append(t.Rows, Row{What: cells[0], Figure: cells[1], Command: unquote(cells[2]), Machine: cells[3], Date: cells[4], Commit: unquote(cells[5])})
		}
	}
	if err := sc.Err(); err != nil {
		return t, fmt.Errorf("%s: %w", name, err)
	}
	t.Preamble = pre.String()
	return t, nil
}

// splitRow splits a Markdown table row into its cells ("\|" is a pipe
// inside a cell).
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

func unquote(s string) string { return strings.TrimSuffix(strings.TrimPrefix(s, "`"), "`") }

// Merge puts rows into t: a row with the What of one already there
// replaces it in its place, a new one goes at the end.
func (t *Table) Merge(rows []Row) {
	for _, r := range rows {
		replaced := false
		for i := range t.Rows {
			if t.Rows[i].What == r.What {
				t.Rows[i], replaced = r, true
				break
			}
		}
		if !replaced {
			t.Rows = append(t.Rows, r)
		}
	}
}

// Write writes t to path.
func (t Table) Write(path string) error {
	return os.WriteFile(path, t.Bytes(), 0o644)
}

// Bytes is t as the file holds it.
func (t Table) Bytes() []byte {
	var b strings.Builder
	pre := t.Preamble
	if pre == "" {
		pre = "# Benchmarks\n\nThe project's current figures. `make bench` measures the Go benchmarks and\nrewrites their rows; `make bench-report FROM=FOLDER` adds an e2e run's or a\ntimed command's (scripts/timed). Each row names the command that measures\nit. Older figures are in this file's history.\n\n"
	}
	b.WriteString(pre)
	b.WriteString(marker + "\n\n")
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat("---|", len(columns)) + "\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s | `%s` |\n", esc(r.What), esc(r.Figure), esc(r.Command), esc(r.Machine), esc(r.Date), esc(r.Commit))
	}
	return []byte(b.String())
}
