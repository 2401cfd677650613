// Package clustertemplate renders cluster templates, YAML documents with
// ${VARIABLE}s as clusterctl's templates have, into unstructured objects.
// The templates are each provider config's (fixtures/clusters/baremetal,
// fixtures/clusters/inmemory): a plain cluster with its machine templates,
// and a ClusterClass form. The runner renders them for every scenario run,
// and the integration tests for their clusters.
//
// [Render] and [RenderBytes] are strict, as clusterctl is: a variable the
// template uses and the caller did not give is an error naming the file
// and every missing variable, never an empty string, and each document
// must have an apiVersion, kind and name. Whole-line comments are dropped
// first, so a comment may mention a ${VARIABLE} without asking for it.
package clustertemplate
