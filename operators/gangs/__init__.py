"""Gang placement: a gang's members, the topology domains they may share and the joint
search that places them all or none. Pure, over `operators.allocator`: the members'
claims, the nodes and the devices in; a placement or the reason there is none out.

Modules: gang (members, domains, `place_gang`), gang_order and gang_memo
(the search's order and its memo of failed sub-problems), gang_search (the joint
search), gang_members (which pods belong to which gang, and where each gang stands).
"""
