package manager

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackwright/stackwright/internal/conversion"
	"github.com/stackwright/stackwright/internal/tlscert"
)

// conversionServicePort is the port of --conversion-webhook-service.
const conversionServicePort = 443

// conversionWebhook serves the conversion webhook of template kinds when
// --conversion-webhook-bind-address is set, and returns how the API server reaches it (nil
// when it is not served).
func (s *setup) conversionWebhook() (*apiextensionsv1.WebhookClientConfig, error) {
	o := s.o
	if o.ConversionWebhookAddr == "" || o.ConversionWebhookAddr == "0" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", o.ConversionWebhookAddr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on --conversion-webhook-bind-address %s: %w", o.ConversionWebhookAddr, err)
	}
	cc, dnsNames, ips, err := o.conversionClientConfig(lis.Addr())
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	cert, certPEM, err := tlscert.LoadOrCreate(filepath.Join(o.DataDir, "tls"), "conversion-webhook", dnsNames, ips)
	if err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("failed to load the conversion webhook's certificate: %w", err)
	}
	cc.CABundle = certPEM
	srv := &conversion.Server{Listener: lis, Cert: cert, Templates: s.c, Log: ctrl.Log.WithName("conversion-webhook")}
	if err := s.mgr.Add(srv); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("failed to add conversion webhook: %w", err)
	}
	return cc, nil
}

// conversionClientConfig is how the API server reaches the conversion webhook bound to
// addr, and the names its certificate must carry for that.
func (o *Options) conversionClientConfig(addr net.Addr) (cc *apiextensionsv1.WebhookClientConfig, dnsNames []string, ips []net.IP, err error) {
	switch {
	case o.ConversionWebhookURL != "":
		u, err := url.Parse(o.ConversionWebhookURL)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, nil, nil, fmt.Errorf("--conversion-webhook-url %q is not an https:// URL without a path", o.ConversionWebhookURL)
		}
		cc = &apiextensionsv1.WebhookClientConfig{URL: ptr("https://" + u.Host)}
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			return cc, nil, []net.IP{ip}, nil
		}
		return cc, []string{u.Hostname()}, nil, nil
	case o.ConversionWebhookService != "":
		if o.Namespace == "" {
			return nil, nil, nil, fmt.Errorf("--conversion-webhook-service %s is a Service in the manager's namespace, and $POD_NAMESPACE is not set", o.ConversionWebhookService)
		}
		svc, ns := o.ConversionWebhookService, o.Namespace
		cc = &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: svc, Port: ptr[int32](conversionServicePort)}}
		return cc, []string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}, nil, nil
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		return nil, nil, nil, fmt.Errorf("the conversion webhook listens on %s, which the API server cannot call: set --conversion-webhook-service or --conversion-webhook-url", addr)
	}
	return &apiextensionsv1.WebhookClientConfig{URL: ptr("https://" + tcp.String())}, nil, []net.IP{tcp.IP}, nil
}
