package workspace

import (
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/config"
)

// The operator settings: a default wait, 0 to refuse at once, and a
// webhook whose secret must be in its environment variable (never an
// unsigned post).
func TestOperatorsFromTheGatewaySection(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	ops, err := Operators(nil, nil, nil, env(nil))
	if err != nil || ops.Wait != DefaultOperatorWait || ops.Webhook != nil {
		t.Fatalf("no section: %+v, %v", ops, err)
	}
	zero := time.Duration(0)
	hook := &config.GatewayWebhook{URL: "https://hooks.example.com/T1", SecretEnv: "HOOK_SECRET"}
	gwc := &config.Gateway{Approvals: config.GatewayApprovals{OperatorWait: &zero, Webhook: hook}}
	ops, err = Operators(gwc, nil, nil, env(map[string]string{"HOOK_SECRET": "k3y"}))
	if err != nil || ops.Wait != 0 || ops.Webhook == nil || string(ops.Webhook.Secret) != "k3y" || ops.Webhook.URL != hook.URL {
		t.Fatalf("set: %+v, %v", ops, err)
	}
	for _, vars := range []map[string]string{nil, {"HOOK_SECRET": ""}} {
		_, err = Operators(gwc, nil, nil, env(vars))
		if err == nil || !strings.Contains(err.Error(), "gateway.approvals.webhook.secretEnv") || !strings.Contains(err.Error(), "HOOK_SECRET") {
			t.Fatalf("secret %v: %v; want an error naming the setting and the variable", vars, err)
		}
	}
}
