"""EXECUTE: connectors apply the planner's targets to the world, one strategy per module.

``protocol.Connector`` is the interface; ``virtual`` speaks Dynamo's VirtualConnector protocol
to an external scaling system; ``kubernetes`` patches the DGD's replicas for the operator to
reconcile (the planner is not yet wired to it by PlannerSpec, nor PLANNER-SCALING to the cluster).
"""
