package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	sectionRef = regexp.MustCompile(`((?:docs/)?[A-Z][A-Z-]*\.md)(?:,\s*|\s+\()"([A-Za-z][^"\n{}]*(?:\n[^"\n{}]*)?)"`)
	heading    = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fence      = regexp.MustCompile("(?ms)^```.*?^```")
	docName    = regexp.MustCompile(`\b(?:docs/)?[A-Z][A-Z-]+\.md\b`)
)

// anchor is the anchor GitHub gives a heading: lower case, punctuation
// but hyphens dropped, spaces made hyphens.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headings are a Markdown file's headings, by anchor and by text.
func headings(t *testing.T, path string) (anchors, texts map[string]bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors, texts = map[string]bool{}, map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
		text := strings.ReplaceAll(m[1], "`", "")
		anchors[anchor(text)] = true
		texts[strings.ToLower(text)] = true
	}
	return anchors, texts
}

// files are the project's Markdown files and the files whose comments
// and messages point at them.
func files(t *testing.T) (markdown, other []string) {
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if strings.HasPrefix(name, ".") && path != root || name == "_artifacts" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(name, ".md"):
			markdown = append(markdown, path)
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".sh"), strings.HasSuffix(name, ".yaml"), name == "Makefile":
			other = append(other, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return markdown, other
}

func TestEveryLinkToTheDocsResolves(t *testing.T) {
	markdown, other := files(t)
	if len(markdown) < 3 {
		t.Fatalf("found %d Markdown files under %s", len(markdown), root)
	}
	for _, path := range markdown {
		b, _ := os.ReadFile(path)
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q: no file %s", path, target, resolved)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if anchors, _ := headings(t, resolved); !anchors[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", path, target, resolved, frag)
			}
		}
	}
	for _, path := range append(markdown, other...) {
		b, _ := os.ReadFile(path)
		for _, m := range sectionRef.FindAllStringSubmatch(string(b), -1) {
			file := m[1]
			if !strings.HasPrefix(file, "docs/") {
				if _, err := os.Stat(filepath.Join(root, "docs", file)); err == nil && !strings.EqualFold(file, "README.md") {
					file = "docs/" + file
				}
			}
			full := filepath.Join(root, file)
			if _, err := os.Stat(full); err != nil {
				t.Errorf("%s: section %q of %s: no such file", path, m[2], file)
				continue
			}
			name := strings.Join(strings.Fields(strings.TrimPrefix(m[2], "//")), " ")
			name = strings.Join(strings.Fields(strings.ReplaceAll(name, "//", "")), " ")
			if _, texts := headings(t, full); !texts[strings.ToLower(name)] {
				t.Errorf("%s: section %q of %s: no such heading", path, name, file)
			}
		}
	}
}

// Every doc a file names (docs/FLEET.md, README.md) exists, at the root
// or under docs/.
func TestEveryNamedDocExists(t *testing.T) {
	markdown, other := files(t)
	for _, path := range append(markdown, other...) {
		b, _ := os.ReadFile(path)
		for _, name := range docName.FindAllString(string(b), -1) {
			if _, err := os.Stat(filepath.Join(root, name)); err == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, "docs", name)); err == nil {
				continue
			}
			t.Errorf("%s names %s, which is neither at the root nor under docs/", path, name)
		}
	}
}

// The anchors are GitHub's.
func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{"Time": "time", "One in-place update, hop by hop": "one-in-place-update-hop-by-hop",
		"CAPI's own e2e specs (make e2e-upstream)": "capis-own-e2e-specs-make-e2e-upstream"} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}
