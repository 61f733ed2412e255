package config

import (
	"net"

	"go.yaml.in/yaml/v3"
)

// GatewayConsole configures the operator console of "toolwire serve"
// (gateway.console): the address of its own listener and the environment
// variable that holds the operator's token. The token itself is never in
// a file.
type GatewayConsole struct {
	// Listen is host:port; "" means the console is offered only when
	// serve --console gives an address.
	Listen string
	// TokenEnv names the environment variable holding the operator token;
	// "" means DefaultConsoleTokenEnv.
	TokenEnv string
}

// DefaultConsoleTokenEnv is the variable the console's operator token is
// read from when gateway.console.tokenEnv names none.
const DefaultConsoleTokenEnv = "TOOLWIRE_CONSOLE_TOKEN"

var consoleFields = []string{"listen", "tokenEnv"}

// gatewayConsole decodes gateway.console.
func (d *decoder) gatewayConsole(v *node, cpath string) *GatewayConsole {
	if !d.wantMap(v, cpath, `a map with "listen" and "tokenEnv"`) {
		return nil
	}
	c := &GatewayConsole{}
	for _, f := range d.entries(v, cpath) {
		fpath := joinPath(cpath, f.key)
		switch f.key {
		case "listen":
			if s, ok := d.nonEmpty(f.value, fpath); ok {
				if _, _, err := net.SplitHostPort(s); err != nil {
					d.errorf(f.value.line, fpath, "must be host:port, such as 127.0.0.1:8790 (%v)", err)
					continue
				}
				c.Listen = s
			}
		case "tokenEnv":
			if s, ok := d.nonEmpty(f.value, fpath); ok {
				if !isEnvName(s) {
					// Not quoted: a token pasted here by mistake stays out of the message.
					d.errorf(f.value.line, fpath, "must name an environment variable (letters, digits and _, not starting with a digit); put the operator token in that variable, never in the file")
					continue
				}
				c.TokenEnv = s
			}
		default:
			d.unknownField(f, cpath, consoleFields)
		}
	}
	return c
}

func consoleNode(c *GatewayConsole) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	if c.Listen != "" {
		addPair(m, "listen", str(c.Listen))
	}
	if c.TokenEnv != "" {
		addPair(m, "tokenEnv", str(c.TokenEnv))
	}
	return m
}
