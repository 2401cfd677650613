// Package doclinks holds the test that every link to a part of the
// project's docs resolves: a Markdown link to a file, and to a heading
// of it (file.md#anchor, as GitHub makes anchors), and a reference to a
// section by name in code, scripts and docs: the file's name, a comma
// and the heading in double quotes.
// A doc reorganised without its links fails make test.
package doclinks
