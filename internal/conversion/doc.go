// Package conversion converts the instances of a StackTemplate's kind between the kind's
// versions, for the versions that rename parameters (spec.versions[].renames): Convert
// moves each renamed value along the versions between the two, and Server answers the API
// server's ConversionReviews with it over HTTPS, at /convert/<template>.
//
// It owns only the conversion: the StackTemplate controller decides when a kind needs the
// webhook and points its CustomResourceDefinition at it, and checks that a template's
// renames can be converted (Check) before it does. The webhook reads templates from the
// manager's cache and writes nothing; the objects it converts are tenants' and are treated
// as data.
package conversion
