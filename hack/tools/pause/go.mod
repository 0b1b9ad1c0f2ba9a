// The node's sandbox ("pause") container: no dependencies.
module lattice.invalid/hack/tools/pause

go 1.26.0
