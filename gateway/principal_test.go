package gateway

import (
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/toolwire/toolwire/tool"
)

// A caller's principal carries what policy rules read: the role, the kind
// of credential, and a JWT's verified claims.
func TestPrincipalCarriesRoleCredentialAndClaims(t *testing.T) {
	v, _, _ := jwtSetup(t, JWTOptions{})
	c := claimsAt(t0)
	c["department"] = "finance"
	token := sign(t, testKeys().rsa, "rsa-1", jose.RS256, c)
	info, err := v(ctxT(t), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := principalFrom(info, "Bearer "+token)
	if p.Subject != "alice" || p.Role != "reader" || p.Credential != tool.CredentialJWT || p.Claims["department"] != "finance" || p.Token.Reveal() != token {
		t.Errorf("JWT principal = %+v (claims %v), want alice, reader, jwt, the claims and the token", p, p.Claims)
	}

	static, err := StaticVerifier([]StaticToken{{SHA256: HashToken("s3cret"), Subject: "bob", Role: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	info, err = static(ctxT(t), "s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	p = principalFrom(info, "Bearer s3cret")
	if p.Subject != "bob" || p.Role != "admin" || p.Credential != tool.CredentialStatic || p.Claims != nil || !p.Token.IsZero() {
		t.Errorf("static principal = %+v, want bob, admin, static, no claims, no token kept", p)
	}
}
