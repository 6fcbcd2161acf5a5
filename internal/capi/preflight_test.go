package capi

import (
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func TestPolicyNamesUser(t *testing.T) {
	policy := func(exprs ...string) *admissionregistrationv1.ValidatingAdmissionPolicy {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		for _, e := range exprs {
			p.Spec.MatchConditions = append(p.Spec.MatchConditions, admissionregistrationv1.MatchCondition{Name: "c", Expression: e})
		}
		return p
	}
	const user = "system:serviceaccount:magnum-capi-bridge:magnum-capi-bridge"
	for name, c := range map[string]struct {
		p    *admissionregistrationv1.ValidatingAdmissionPolicy
		want bool
	}{
		"names it":              {policy("request.userInfo.username == '" + user + "'"), true},
		"another condition too": {policy("true", "request.userInfo.username == '"+user+"'"), true},
		"another account":       {policy("request.userInfo.username == 'system:serviceaccount:other:magnum-capi-bridge'"), false},
		"a prefix of it":        {policy("request.userInfo.username == 'system:serviceaccount:magnum-capi-bridge:magnum-capi'"), false},
		"not the username":      {policy("request.namespace == '" + user + "'"), false},
		"no condition":          {policy(), false},
	} {
		t.Run(name, func(t *testing.T) { require.Equal(t, c.want, namesUser(c.p, user)) })
	}
}
