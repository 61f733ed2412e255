package main

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

func TestUserAcceptsTheDefaults(t *testing.T) {
	tests := []struct {
		name, params, want string
	}{
		{"every kind of default",
			`{"message":"m","requestedSchema":{"type":"object","properties":{
				"name":{"type":"string","default":"John Doe"},
				"age":{"type":"integer","default":30},
				"score":{"type":"number","default":95.5},
				"status":{"type":"string","enum":["active","inactive"],"default":"active"},
				"verified":{"type":"boolean","default":true}}}}`,
			`{"action":"accept","content":{"age":30,"name":"John Doe","score":95.5,"status":"active","verified":true}}`},
		{"fields without a default stay empty",
			`{"message":"m","requestedSchema":{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer","default":null}}}}`,
			`{"action":"accept","content":{}}`},
		{"no schema", `{"message":"m"}`, `{"action":"accept","content":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := user{}.Ask(context.Background(), tool.Elicitation, json.RawMessage(tt.params))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal([]byte(tt.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("answer %s, want %s", got, tt.want)
			}
		})
	}
}

func TestUserHasNoModel(t *testing.T) {
	_, err := user{}.Ask(context.Background(), tool.Sampling, json.RawMessage(`{}`))
	if !errors.Is(err, tool.ErrNotSupported) {
		t.Errorf("sampling: %v, want ErrNotSupported", err)
	}
}

func TestParseContext(t *testing.T) {
	c, err := parseContext(`{"name":"auth/pre-registration","client_id":"id","client_secret":"s"}`)
	if err != nil || c.ClientID != "id" || c.ClientSecret != "s" {
		t.Errorf("got %+v, %v", c, err)
	}
	if c, err := parseContext(""); err != nil || *c != (scenarioContext{}) {
		t.Errorf("empty context: %+v, %v", c, err)
	}
	if _, err := parseContext("[1]"); err == nil {
		t.Error("a JSON array was accepted")
	}
}
