# A Science DMZ testbed on Chameleon bare metal: nodes come from a Blazar lease
# (create it first: docs/testbeds.md). Security groups do not apply to bare
# metal ports, so none are attached; the host firewall roles protect the nodes.
locals {
  policy    = yamldecode(file(coalesce(var.policy_file, "${path.module}/../testbed-policy.yml")))
  catalogue = yamldecode(file(coalesce(var.catalogue_file, "${path.module}/../../../policy/services.yml"))).sdmz_service_catalogue
}

module "testbed" {
  source = "../../modules/sdmz_testbed"

  name_prefix             = var.name_prefix
  site                    = local.policy.sdmz_local_site
  roles                   = var.roles
  image_name              = var.image_name
  key_pair                = var.key_pair
  ansible_user            = "cc"
  external_network_name   = "public"
  management_network_name = "sharednet1"
  dmz_mtu                 = var.dmz_mtu
  reservation_id          = var.reservation_id
  enable_security_groups  = false
  assign_floating_ips     = true
  mgmt_allowed_cidrs      = var.mgmt_allowed_cidrs
  interface_names         = { mgmt = "eno1", dmz = "eno2", remote = "eno3" }
  collaborators           = local.policy.sdmz_collaborators
  catalogue               = local.catalogue
}
