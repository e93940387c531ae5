// Package instance reconciles the instances of the kinds StackTemplates define: each
// instance, a tenant's object, becomes a Stack in the template's platform namespace
// (rendered from the template and the instance's parameters), shows that Stack's progress
// in its status, and receives the outputs the template publishes in its own namespace. The
// kinds are unknown at build time: the controller works on unstructured objects and starts
// watching a kind when its template is served.
package instance
