# tflint for every module and env (tests/terraform runs it on each). The
# bundled terraform ruleset, all rules: typed and documented variables and
# outputs, standard module structure, naming, pinned versions, no unused
# declarations.
plugin "terraform" {
  enabled = true
  preset  = "all"
}
