package executor

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackwright/stackwright/api/v1alpha1"
)

// FirstTenant is the first non-empty answer of fs, in order.
func FirstTenant(fs ...TenantOf) TenantOf {
	return func(ctx context.Context, u *v1alpha1.Update) string {
		for _, f := range fs {
			if t := f.Tenant(ctx, u); t != "" {
				return t
			}
		}
		return ""
	}
}

// namespaceLabelTTL is how long a namespace's tenant label is remembered.
const namespaceLabelTTL = time.Minute

// NamespaceLabelTenant names an Update's tenant by the value of label on its namespace, so
// that the namespaces of one tenant share one fair share: a tenant with two namespaces must
// not hold twice the slots. Namespaces are labelled by the platform (a tenant cannot edit
// its Namespace object); one without the label is a tenant of its own. The value is
// prefixed so that it never equals a namespace's name. Namespaces are read uncached (the
// manager does not watch them) and remembered for a minute.
func NamespaceLabelTenant(r client.Reader, label string) TenantOf {
	type entry struct {
		tenant string
		at     time.Time
	}
	var (
		mu   sync.Mutex
		seen = map[string]entry{}
	)
	return func(ctx context.Context, u *v1alpha1.Update) string {
		mu.Lock()
		e, ok := seen[u.Namespace]
		mu.Unlock()
		if ok && time.Since(e.at) < namespaceLabelTTL {
			return e.tenant
		}
		ns := &corev1.Namespace{}
		tenant := ""
		if err := r.Get(ctx, client.ObjectKey{Name: u.Namespace}, ns); err == nil {
			if v := ns.Labels[label]; v != "" {
				tenant = "tenant:" + v
			}
		} else if ok {
			// Keep the last answer while the API server does not give a new one.
			return e.tenant
		}
		mu.Lock()
		if len(seen) > 10000 {
			clear(seen)
		}
		seen[u.Namespace] = entry{tenant: tenant, at: time.Now()}
		mu.Unlock()
		return tenant
	}
}
