"""EXECUTE: connectors apply the planner's targets to the world, one strategy per module.

``protocol.Connector`` is the interface; ``virtual`` speaks Dynamo's VirtualConnector protocol
to an external scaling system. A Kubernetes connector (patching the deployment resource's
replicas for an operator to reconcile) comes with the reference operator.
"""
