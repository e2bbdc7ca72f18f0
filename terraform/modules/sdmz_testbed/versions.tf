terraform {
  required_version = ">= 1.8"

  required_providers {
    openstack = {
      source = "terraform-provider-openstack/openstack"
      # 1.54.x: the newest major the kit's build machines can build offline (docs/testbeds.md).
      version = "~> 1.54.1"
    }
  }
}
