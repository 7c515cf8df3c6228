/*
 * graph.h: the simulator's CUDA graphs (graph.c builds them, graph_exec.c
 * instantiates and runs them).
 */
#ifndef TGS_SIM_GRAPH_H
#define TGS_SIM_GRAPH_H

#include "sim.h"

#pragma GCC visibility push(hidden)

/* What a node does; also one step of an executable graph. */
struct sim_gwork {
    CUgraphNodeType type;
    union {
        CUDA_KERNEL_NODE_PARAMS_v2 kernel;
        CUDA_MEMCPY3D copy;
        CUDA_MEMSET_NODE_PARAMS memset;
        CUDA_HOST_NODE_PARAMS host;
        CUevent event;
        struct CUgraph_st *child; /* the node's own copy of the child graph */
        CUDA_MEM_ALLOC_NODE_PARAMS alloc;
        CUdeviceptr free_ptr;
    } u;
};

struct CUgraphNode_st {
    struct sim_obj obj;
    struct CUgraph_st *graph;
    struct sim_gwork w;
    unsigned int kattrs_set;             /* kernel nodes: launch attributes set (bits) */
    CUlaunchAttributeValue kattrs[16];
    struct CUgraphNode_st **deps; /* nodes this one depends on */
    size_t ndeps;
};

/* A graph's references on a user object (user_object.c). */
struct sim_graph_ref {
    struct CUuserObject_st *obj;
    unsigned int count;
};

struct CUgraph_st {
    struct sim_obj obj;
    struct sim_graph_ref *refs;
    size_t nrefs;
    struct CUgraphNode_st **nodes; /* in insertion order */
    size_t n;
    struct CUgraph_st *origin; /* the graph this one was cloned from (a clone keeps its order) */
};

/* An executable graph: its nodes' work in a dependency order, child graphs
 * inlined; src is the node of the instantiated graph a step came from
 * (NULL inside a child graph). */
struct sim_gstep {
    struct sim_gwork w;
    struct CUgraphNode_st *src;
    struct CUgraphNode_st *parent; /* the top-level child-graph node it is inside */
    int disabled; /* cuGraphNodeSetEnabled(.., 0): skipped at launch */
};

struct CUgraphExec_st {
    struct sim_obj obj;
    struct sim_gstep *steps;
    size_t n;
    cuuint64_t flags; /* as instantiated */
};

/* graph.c */
CUresult sim_graph_ok(CUgraph g);
CUresult sim_graph_node_ok(CUgraphNode n, int type); /* type -1: any kind */
int sim_graph_kernel_ok(const CUDA_KERNEL_NODE_PARAMS_v2 *p);
void sim_graph_kernel_norm(CUDA_KERNEL_NODE_PARAMS_v2 *p);
void sim_graph_kernel_v2(const CUDA_KERNEL_NODE_PARAMS_v1 *a, CUDA_KERNEL_NODE_PARAMS_v2 *b);
CUresult sim_graph_clone(struct CUgraph_st *g, struct CUgraph_st **out);
/* user_object.c: drop every user-object reference the graph holds */
void sim_graph_drop_refs(struct CUgraph_st *g);
void sim_graph_free(struct CUgraph_st *g);
/* graph_exec.c: a graph's steps, in order (malloc'ed); the step of a node */
CUresult sim_graph_steps(struct CUgraph_st *g, struct sim_gstep **out, size_t *n);
struct sim_gstep *sim_graph_step_of(CUgraphExec e, CUgraphNode n, int type);

#pragma GCC visibility pop

#endif /* TGS_SIM_GRAPH_H */
