/*
 * sp_net.h: the network: egress policy (sp_egress.h), credentials
 * (sp_cred.h), TLS and the node CA (sp_tls.h), HTTP request heads
 * (sp_http.h) and the gateway (sp_gateway.h).  Built on the core, storage
 * and the VM's channel.
 */
#ifndef SP_NET_H
#define SP_NET_H

#include "sp_vm.h"
#include "sp_egress.h"
#include "sp_cred.h"
#include "sp_tls.h"
#include "sp_http.h"
#include "sp_gateway.h"

#endif
