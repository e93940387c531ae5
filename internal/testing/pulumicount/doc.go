// Package pulumicount counts the pulumi CLI processes a piece of code starts: a bin
// directory like the real one whose pulumi is a shell script that logs each start and runs
// the real CLI. Benchmarks report the counts; engine tests pin them.
package pulumicount
