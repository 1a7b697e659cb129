// Package deploy holds the deployable shape of the processor: Dockerfile
// (the image) and kubernetes/ (a StatefulSet with its ConfigMap, Secret,
// headless Service and PodDisruptionBudget). It has no code; its test
// reads the manifests and checks that they fit together and that the
// configuration they carry passes the processor's own checks
// (docs/operations.md, "Deploying").
package deploy
