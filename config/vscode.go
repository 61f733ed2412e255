package config

// vscodeFile decodes VS Code's .vscode/mcp.json: "servers" and "inputs";
// any other top-level key belongs to VS Code and is left alone.
func (d *decoder) vscodeFile(root *node, f *File) {
	d.inputsAllowed = true
	d.inputs = map[string]Input{}
	top := d.entries(root, "")
	// Inputs first: servers refer to them, wherever they are in the file.
	for _, p := range top {
		if p.key == "inputs" {
			d.vscodeInputs(p)
		}
	}
	for _, p := range top {
		if p.key == "servers" {
			f.Servers = d.keyedServers(p, "servers", vscodeRules)
		}
	}
}

// vscodeInputs decodes VS Code's list of inputs. Only "promptString" ones
// can be asked for on a terminal; the others are remembered so that a
// server using one gets a clear error.
func (d *decoder) vscodeInputs(p pair) {
	const path = "inputs"
	if p.value.kind != listNode {
		d.mismatch(p.value, path, "a list of inputs")
		return
	}
	seen := map[string]int{}
	for i, item := range p.value.items {
		ipath := indexPath(path, i)
		if !d.wantMap(item, ipath, "a map with \"type\", \"id\" and \"description\"") {
			continue
		}
		var in Input
		typ, idLine := "", 0
		for _, f := range d.entries(item, ipath) {
			fpath := joinPath(ipath, f.key)
			switch f.key {
			case "type":
				typ, _ = d.nonEmpty(f.value, fpath)
			case "id":
				if id, ok := d.nonEmpty(f.value, fpath); ok {
					if validInputID(id) {
						in.ID, idLine = id, f.keyLine
					} else {
						d.errorf(f.value.line, fpath, "invalid input ID %q (want letters, digits, '_', '.' or '-')", id)
					}
				}
			case "description":
				in.Description, _ = d.str(f.value, fpath, "a string")
			case "password":
				in.Password, _ = d.boolean(f.value, fpath)
			case "default":
				in.Default, _ = d.str(f.value, fpath, "a string")
			case "options", "command", "args":
				// Settings of pickString and command inputs.
			default:
				d.warnf(f.keyLine, fpath, "ignored (not an input setting toolwire uses)")
			}
		}
		if in.ID == "" {
			if !hasKey(item, "id") {
				d.errorf(item.line, ipath, `needs "id", the name used in ${input:ID}`)
			}
			continue
		}
		if first, dup := seen[in.ID]; dup {
			d.errorf(idLine, joinPath(ipath, "id"), "duplicate input %q (first defined on line %d)", in.ID, first)
			continue
		}
		seen[in.ID] = idLine
		switch typ {
		case "promptString", "":
			d.inputs[in.ID] = in
		default:
			if d.otherInputs == nil {
				d.otherInputs = map[string]string{}
			}
			d.otherInputs[in.ID] = typ
		}
	}
}

// toolwireInputs decodes toolwire's own "inputs": a map from ID to what to
// ask, every one a prompt for text.
func (d *decoder) toolwireInputs(p pair) {
	const path = "inputs"
	if !d.wantMap(p.value, path, "a map from input ID to its settings") {
		return
	}
	for _, e := range d.entries(p.value, path) {
		ipath := joinPath(path, e.key)
		if !validInputID(e.key) {
			d.errorf(e.keyLine, ipath, "invalid input ID (want letters, digits, '_', '.' or '-')")
			continue
		}
		in := Input{ID: e.key}
		if e.value.kind == scalarNode && e.value.typ == typeNull {
			d.inputs[in.ID] = in
			continue
		}
		if !d.wantMap(e.value, ipath, "a map of input settings") {
			continue
		}
		for _, f := range d.entries(e.value, ipath) {
			fpath := joinPath(ipath, f.key)
			switch f.key {
			case "description":
				in.Description, _ = d.str(f.value, fpath, "a string")
			case "password":
				in.Password, _ = d.boolean(f.value, fpath)
			case "default":
				in.Default, _ = d.str(f.value, fpath, "a string")
			default:
				d.unknownField(f, ipath, []string{"description", "password", "default"})
			}
		}
		d.inputs[in.ID] = in
	}
}
