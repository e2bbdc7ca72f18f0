# A Science DMZ testbed on Jetstream2 virtual machines, with the security
# groups derived from the same policy the network ACLs use.
locals {
  policy    = yamldecode(file(coalesce(var.policy_file, "${path.module}/../testbed-policy.yml")))
  catalogue = yamldecode(file(coalesce(var.catalogue_file, "${path.module}/../../../policy/services.yml"))).sdmz_service_catalogue
}

module "testbed" {
  source = "../../modules/sdmz_testbed"

  name_prefix            = var.name_prefix
  site                   = local.policy.sdmz_local_site
  roles                  = var.roles
  image_name             = var.image_name
  key_pair               = var.key_pair
  ansible_user           = "ubuntu"
  external_network_name  = "public"
  dmz_mtu                = var.dmz_mtu
  enable_security_groups = true
  assign_floating_ips    = true
  mgmt_allowed_cidrs     = var.mgmt_allowed_cidrs
  collaborators          = local.policy.sdmz_collaborators
  catalogue              = local.catalogue
}
