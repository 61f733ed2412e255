//go:build unix

package bench

import (
	"cmp"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"slices"
	"strings"
)

// binaryMakeup describes what makes up the binary at path: its size, its
// ELF sections by kind, and its code and data symbols by the module they
// come from (the standard library as one), the largest first. It is read
// with debug/elf and debug/buildinfo, as `go tool nm -size` would list the
// symbols.
func binaryMakeup(path string, top int) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the build info of %s: %w", path, err)
	}
	modules := []string{bi.Main.Path}
	for _, d := range bi.Deps {
		modules = append(modules, d.Path)
	}
	// Longest first, so that a nested module wins over its parent.
	slices.SortFunc(modules, func(a, b string) int { return cmp.Compare(len(b), len(a)) })

	var sections struct{ code, rodata, pcln, data, debug, other uint64 }
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS {
			continue // .bss, .noptrbss: not in the file
		}
		switch {
		case s.Name == ".text":
			sections.code += s.Size
		case s.Name == ".rodata" || s.Name == ".typelink" || s.Name == ".itablink":
			sections.rodata += s.Size
		case s.Name == ".gopclntab":
			sections.pcln += s.Size
		case s.Name == ".data" || s.Name == ".noptrdata" || s.Name == ".go.buildinfo":
			sections.data += s.Size
		case strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") || s.Name == ".symtab" || s.Name == ".strtab":
			sections.debug += s.Size
		default:
			sections.other += s.Size
		}
	}
	syms, err := f.Symbols()
	if err != nil {
		return "", fmt.Errorf("reading the symbols of %s: %w", path, err)
	}
	bySource := map[string]uint64{}
	var total uint64
	for _, s := range syms {
		if s.Size == 0 {
			continue
		}
		if t := elf.ST_TYPE(s.Info); t != elf.STT_FUNC && t != elf.STT_OBJECT {
			continue
		}
		if int(s.Section) >= len(f.Sections) || f.Sections[s.Section].Type == elf.SHT_NOBITS {
			continue // zeroed memory at run time (.bss), not in the file
		}
		src := symbolSource(s.Name, modules)
		if src == "main" {
			src = bi.Main.Path
		}
		bySource[src] += s.Size
		total += s.Size
	}
	type part struct {
		name string
		size uint64
	}
	var parts []part
	for k, v := range bySource {
		parts = append(parts, part{k, v})
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(b.size, a.size) })

	var sb strings.Builder
	mib := func(n uint64) string { return fmtBytes(float64(n)) }
	fmt.Fprintf(&sb, "The toolwire binary (%s): %s on disk; in it code (.text) %s, read-only data and type tables %s, the PC-line table (.gopclntab) %s, data %s, DWARF debug information and symbol tables %s (go build -ldflags=-w drops the DWARF), other sections %s.\n\n",
		bi.GoVersion, mib(uint64(st.Size())), mib(sections.code), mib(sections.rodata), mib(sections.pcln), mib(sections.data), mib(sections.debug), mib(sections.other))
	fmt.Fprintf(&sb, "Code and data symbols in the file by module (%s in all; the PC-line table and DWARF are apart):\n\n", mib(total))
	table := [][]string{{"module", "size", "share"}}
	var rest uint64
	for i, p := range parts {
		if i >= top {
			rest += p.size
			continue
		}
		table = append(table, []string{p.name, mib(p.size), fmt.Sprintf("%.1f %%", 100*float64(p.size)/float64(total))})
	}
	if rest > 0 {
		table = append(table, []string{fmt.Sprintf("%d others", len(parts)-top), mib(rest), fmt.Sprintf("%.1f %%", 100*float64(rest)/float64(total))})
	}
	writeTable(&sb, table)
	return sb.String(), nil
}

// symbolSource names where a symbol comes from: the module of its package
// path, "standard library", or "runtime tables and type data" for the
// linker's own symbols (type:*, go:*, runtime tables).
func symbolSource(name string, modules []string) string {
	if strings.HasPrefix(name, "type:") || strings.HasPrefix(name, "go:") || strings.HasPrefix(name, "$") {
		return "type descriptors and linker tables"
	}
	// A symbol's name starts with its package's path, then a '.'.
	for _, m := range modules {
		if strings.HasPrefix(name, m+".") || strings.HasPrefix(name, m+"/") {
			return m
		}
	}
	// Else the package path ends at the first '.' after its last '/'
	// (before any receiver or type arguments).
	p := name
	if i := strings.IndexAny(p, "[("); i >= 0 {
		p = p[:i]
	}
	slash := strings.LastIndex(p, "/")
	if dot := strings.Index(p[slash+1:], "."); dot >= 0 {
		p = p[:slash+1+dot]
	}
	if p == "main" {
		return p
	}
	first, _, _ := strings.Cut(p, "/")
	if !strings.Contains(first, ".") {
		return "standard library"
	}
	return "other: " + p
}
