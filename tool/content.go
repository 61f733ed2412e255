package tool

import "encoding/json"

// Content is one block of a tool's result. The concrete types are [*Text],
// [*Image], [*Audio], [*Resource] and [*ResourceLink]; the set is closed so
// that every consumer can handle every block.
//
// Each block marshals to JSON with a "type" field naming its kind, in the
// same shape MCP uses, so a result printed with --json reads familiarly.
type Content interface {
	// Kind names the block type: "text", "image", "audio", "resource" or
	// "resource_link".
	Kind() string
	isContent()
}

// Text is a block of plain text.
type Text struct {
	Text string
}

// Image is an image, as raw bytes with their MIME type.
type Image struct {
	Data     []byte
	MIMEType string
}

// Audio is a sound clip, as raw bytes with their MIME type.
type Audio struct {
	Data     []byte
	MIMEType string
}

// Resource is a resource embedded in a result: its URI and either its text
// or its bytes.
type Resource struct {
	URI      string
	MIMEType string
	Text     string
	Blob     []byte
}

// ResourceLink points at a resource the caller may fetch separately.
type ResourceLink struct {
	URI         string
	Name        string
	Title       string
	Description string
	MIMEType    string
	Size        *int64
}

func (*Text) Kind() string         { return "text" }
func (*Image) Kind() string        { return "image" }
func (*Audio) Kind() string        { return "audio" }
func (*Resource) Kind() string     { return "resource" }
func (*ResourceLink) Kind() string { return "resource_link" }

func (*Text) isContent()         {}
func (*Image) isContent()        {}
func (*Audio) isContent()        {}
func (*Resource) isContent()     {}
func (*ResourceLink) isContent() {}

// MarshalJSON encodes the block as {"type":"text","text":…}.
func (c *Text) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", c.Text})
}

// mediaJSON is the shared wire shape of images and audio; Data is base64.
type mediaJSON struct {
	Type     string `json:"type"`
	MIMEType string `json:"mimeType"`
	Data     []byte `json:"data"`
}

// MarshalJSON encodes the block with its data in base64.
func (c *Image) MarshalJSON() ([]byte, error) {
	return json.Marshal(mediaJSON{"image", c.MIMEType, c.Data})
}

// MarshalJSON encodes the block with its data in base64.
func (c *Audio) MarshalJSON() ([]byte, error) {
	return json.Marshal(mediaJSON{"audio", c.MIMEType, c.Data})
}

// MarshalJSON encodes the block as {"type":"resource","resource":{…}}.
func (c *Resource) MarshalJSON() ([]byte, error) {
	type contents struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType,omitempty"`
		Text     string `json:"text,omitempty"`
		Blob     []byte `json:"blob,omitempty"`
	}
	return json.Marshal(struct {
		Type     string   `json:"type"`
		Resource contents `json:"resource"`
	}{"resource", contents{c.URI, c.MIMEType, c.Text, c.Blob}})
}

// MarshalJSON encodes the block as {"type":"resource_link",…}.
func (c *ResourceLink) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Type        string `json:"type"`
		URI         string `json:"uri"`
		Name        string `json:"name,omitempty"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
		MIMEType    string `json:"mimeType,omitempty"`
		Size        *int64 `json:"size,omitempty"`
	}{"resource_link", c.URI, c.Name, c.Title, c.Description, c.MIMEType, c.Size})
}
